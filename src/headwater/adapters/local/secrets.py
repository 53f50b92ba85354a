"""Secret prop values encrypted at rest with a Fernet key kept in the data dir (0600)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet


class FernetSecrets:
    def __init__(self, key_file: Path, key: str | None = None) -> None:
        if key is None:
            if not key_file.exists():
                key_file.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(Fernet.generate_key())
            key = key_file.read_text().strip()
        self.fernet = Fernet(key.encode())

    def encrypt(self, value: Any) -> str:
        return self.fernet.encrypt(json.dumps(value).encode()).decode()

    def decrypt(self, token: str) -> Any:
        return json.loads(self.fernet.decrypt(token.encode()))
