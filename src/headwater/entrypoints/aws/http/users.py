"""UsersFunction: /v1/users/me."""

from headwater.api import users
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Users", [users.router])
