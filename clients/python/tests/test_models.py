"""The typed models never drift: every field of each model is checked against the schema the
server serves (`/v1/openapi.json`) and against `spec/universal-schema.json`."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, Set, get_args

import httpx

from agent_api_client import models

from .server import ROOT, Server


def keys(model: Any) -> Set[str]:
    return set(model.__required_keys__) | set(model.__optional_keys__)


class ModelsMatchTheSchemas(unittest.TestCase):
    def test_every_body_model_has_exactly_the_fields_of_the_servers_openapi_document(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            server = Server(Path(directory)).start()
            try:
                document = httpx.get(
                    server.url + "/v1/openapi.json",
                    headers={"Authorization": f"Bearer {server.token}"},
                ).json()
            finally:
                server.stop()
        schemas: Dict[str, Any] = document["components"]["schemas"]
        for name, model in models.OPENAPI_MODELS.items():
            with self.subTest(model=name):
                self.assertIn(name, schemas, f"the server has no schema {name}")
                schema = schemas[name]
                self.assertEqual(keys(model), set(schema.get("properties", {})), name)
                for required in schema.get("required", []):
                    self.assertIn(required, model.__required_keys__, f"{name}.{required} is required")

    def test_every_event_model_has_exactly_the_fields_of_the_universal_schema(self) -> None:
        schema = json.loads((ROOT / "spec" / "universal-schema.json").read_text())
        definitions: Dict[str, Any] = schema["definitions"]
        self.assertEqual(keys(models.UniversalEvent), set(schema["properties"]))
        for name, model in models.UNIVERSAL_MODELS.items():
            with self.subTest(model=name):
                definition = definitions[name]
                self.assertEqual(keys(model), set(definition.get("properties", {})), name)
                for required in definition.get("required", []):
                    self.assertIn(required, model.__required_keys__, f"{name}.{required}")
        parts = {p["properties"]["type"]["enum"][0]: p for p in definitions["ContentPart"]["oneOf"]}
        self.assertEqual(set(models.CONTENT_PARTS), set(parts))
        for kind, model in models.CONTENT_PARTS.items():
            with self.subTest(part=kind):
                self.assertEqual(keys(model), set(parts[kind]["properties"]), kind)
                for required in parts[kind]["required"]:
                    self.assertIn(required, model.__required_keys__, f"{kind}.{required}")
        for literal, enum in [
            (models.EventType, "UniversalEventType"),
            (models.EventSource, "EventSource"),
            (models.ItemKind, "ItemKind"),
            (models.ItemRole, "ItemRole"),
            (models.ItemStatus, "ItemStatus"),
            (models.PermissionStatus, "PermissionStatus"),
            (models.QuestionStatus, "QuestionStatus"),
        ]:
            with self.subTest(enum=enum):
                self.assertEqual(set(get_args(literal)), set(definitions[enum]["enum"]), enum)


if __name__ == "__main__":
    unittest.main()
