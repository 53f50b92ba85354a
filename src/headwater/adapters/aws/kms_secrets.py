"""The Secrets port on AWS: envelope encryption under a KMS key (template.yaml `SecretsKey`).

No function holds the key, and no key is in any function's environment: a trusted function asks
KMS for a data key (GenerateDataKey), encrypts with it here (AES-256-GCM) and stores the data key
as KMS wrapped it next to the value; decrypting asks KMS to unwrap that data key (Decrypt). Only
the roles template.yaml grants these on this key can do either; the runner's role can do neither,
and the runner gets the decrypted props of the run it executes, nothing else.

A warm container keeps its data keys: one data key encrypts for an hour, and each unwrapped key
is remembered (a bounded number), so KMS is asked once per data key per container, not per value.
Every KMS call carries the encryption context {"headwater": "secret-props"}, which the roles'
policies require, so the key cannot be used through these permissions for anything else.

A value is `kms1.<wrapped data key>.<nonce + ciphertext>` (URL-safe base64): the wrapped key is
the GCM associated data, so a ciphertext cannot be moved under another data key."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from headwater.domain.errors import Unavailable

PREFIX = "kms1"
CONTEXT = {"headwater": "secret-props"}
_NONCE_BYTES = 12


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class KmsSecrets:
    def __init__(self, connect: Callable[[], Any], key_id: str, data_key_ttl_s: float = 3600.0,
                 max_keys: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        """`connect` makes the KMS client at first use: functions that never touch a secret (and
        whose role may not use the key) make no client and call nothing."""
        self._connect = connect
        self._client: Any = None
        self.key_id = key_id
        self.data_key_ttl_s = data_key_ttl_s
        self.max_keys = max_keys
        self.clock = clock
        self._current: tuple[bytes, bytes, float] | None = None  # (plaintext key, wrapped key, made at)
        self._unwrapped: OrderedDict[bytes, bytes] = OrderedDict()
        self._guard = threading.Lock()

    @property
    def client(self) -> Any:
        if not self.key_id:
            raise Unavailable("No KMS key for secret props: HEADWATER_KMS_KEY_ARN is not set (template.yaml).")
        if self._client is None:
            self._client = self._connect()
        return self._client

    def encrypt(self, value: Any) -> str:
        key, wrapped = self._data_key()
        nonce = os.urandom(_NONCE_BYTES)
        sealed = AESGCM(key).encrypt(nonce, json.dumps(value).encode(), wrapped)
        return f"{PREFIX}.{_b64(wrapped)}.{_b64(nonce + sealed)}"

    def decrypt(self, token: str) -> Any:
        if not token.startswith(PREFIX + "."):  # a Fernet token of the former SecretKey parameter
            raise Unavailable("A secret stored before secret props were encrypted with KMS cannot be read: "
                              "set it again (docs/aws.md, Secrets).")
        _, wrapped_text, body_text = token.split(".")
        wrapped, body = _unb64(wrapped_text), _unb64(body_text)
        key = self._unwrap(wrapped)
        return json.loads(AESGCM(key).decrypt(body[:_NONCE_BYTES], body[_NONCE_BYTES:], wrapped))

    def _data_key(self) -> tuple[bytes, bytes]:
        with self._guard:
            current = self._current
            if current is not None and self.clock() - current[2] < self.data_key_ttl_s:
                return current[0], current[1]
        made = self.client.generate_data_key(KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=CONTEXT)
        key, wrapped = bytes(made["Plaintext"]), bytes(made["CiphertextBlob"])
        with self._guard:
            self._current = (key, wrapped, self.clock())
            self._remember(wrapped, key)
        return key, wrapped

    def _unwrap(self, wrapped: bytes) -> bytes:
        with self._guard:
            key = self._unwrapped.get(wrapped)
            if key is not None:
                self._unwrapped.move_to_end(wrapped)
                return key
        key = bytes(self.client.decrypt(CiphertextBlob=wrapped, KeyId=self.key_id,
                                        EncryptionContext=CONTEXT)["Plaintext"])
        with self._guard:
            self._remember(wrapped, key)
        return key

    def _remember(self, wrapped: bytes, key: bytes) -> None:
        self._unwrapped[wrapped] = key
        while len(self._unwrapped) > self.max_keys:
            self._unwrapped.popitem(last=False)
