"""OAuthFunction: /v1/oauth (apps' OAuth clients, connect, the provider's redirect back)."""

from headwater.api import oauth
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("OAuth", [oauth.router])
