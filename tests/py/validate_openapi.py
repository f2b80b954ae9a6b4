"""Validates the OpenAPI document on stdin (exit 1 with the reason if invalid)."""
import json
import sys

from openapi_spec_validator import validate

try:
    validate(json.load(sys.stdin))
except Exception as error:  # the validator raises several kinds
    print(f"invalid OpenAPI document: {str(error).splitlines()[0]}")
    sys.exit(1)
print("valid")
