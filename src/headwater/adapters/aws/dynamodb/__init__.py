"""The storage ports over DynamoDB: a resources table and an events table (docs/aws.md, "Tables")."""

from headwater.adapters.aws.dynamodb.store import DynamoStore
from headwater.adapters.aws.dynamodb.tables import create_tables

__all__ = ["DynamoStore", "create_tables"]
