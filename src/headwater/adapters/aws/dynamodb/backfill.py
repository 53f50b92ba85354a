"""One-off: deliveries made before the keys-only `gsi3` index get its keys, so they are listed again.

Deliveries used to be listed on `gsi2` (projection ALL: every save of a delivery wrote a copy of
it to the index); they are listed on `gsi3` (keys only) now. After deploying the template that
adds `gsi3`, run once, with the stack's table name and credentials in the environment:

    HEADWATER_RESOURCES_TABLE=<stack>-ResourcesTable-... python -m headwater.adapters.aws.dynamodb.backfill

It scans the resources table for deliveries still on `gsi2`, sets their `gsi3` keys from their
`gsi2` ones and removes those (one conditional UpdateItem each). Idempotent: run it again, or
while deliveries are being made, and it moves only what is left.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from headwater.adapters.aws.dynamodb.tables import error_code

log = logging.getLogger("headwater.backfill")


def backfill_deliveries(client: Any, table: str) -> int:
    """Moves every delivery still listed on gsi2 to gsi3; how many it moved."""
    request: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "sk = :delivery AND attribute_exists(gsi2pk) AND attribute_not_exists(gsi3pk)",
        "ExpressionAttributeValues": {":delivery": {"S": "#delivery"}},
        "ProjectionExpression": "pk, sk, gsi2pk, gsi2sk",
        "ConsistentRead": True,
    }
    moved = 0
    while True:
        response = client.scan(**request)
        for item in response.get("Items", []):
            try:
                client.update_item(
                    TableName=table, Key={"pk": item["pk"], "sk": item["sk"]},
                    UpdateExpression="SET gsi3pk = :pk, gsi3sk = :sk REMOVE gsi2pk, gsi2sk",
                    ConditionExpression="attribute_exists(gsi2pk)",
                    ExpressionAttributeValues={":pk": item["gsi2pk"], ":sk": item["gsi2sk"]})
            except ClientError as e:  # moved meanwhile by another run of this
                if error_code(e) != "ConditionalCheckFailedException":
                    raise
                continue
            moved += 1
        if "LastEvaluatedKey" not in response:
            return moved
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def main() -> None:
    import boto3

    from headwater.adapters.aws.config import AwsConfig

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = AwsConfig()
    client = boto3.client("dynamodb", endpoint_url=config.endpoint_url)
    moved = backfill_deliveries(client, config.resources_table)
    log.info("%d deliveries of %s now listed on gsi3", moved, config.resources_table)


if __name__ == "__main__":
    main()
