package io.confluent.kafka.schemaregistry.json;

import org.everit.json.schema.Schema;

/** Stand-in for the registry's JsonSchema: the diff package only wraps loaded schemas in it
 *  to drop equal branches of a combined schema, equal by their canonical text. */
public class JsonSchema {
  private final Schema schema;
  private final String canonical;

  public JsonSchema(Schema schema) {
    this.schema = schema;
    this.canonical = new org.json.JSONObject(schema.toString()).toString();
  }

  public Schema rawSchema() {
    return schema;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof JsonSchema && ((JsonSchema) o).canonical.equals(canonical);
  }

  @Override
  public int hashCode() {
    return canonical.hashCode();
  }
}
