package oracle;

import io.confluent.kafka.schemaregistry.json.diff.Difference;
import io.confluent.kafka.schemaregistry.json.diff.SchemaDiff;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.everit.json.schema.FalseSchema;
import org.everit.json.schema.Schema;
import org.everit.json.schema.TrueSchema;
import org.everit.json.schema.loader.SchemaLoader;
import org.json.JSONArray;
import org.json.JSONObject;

/** One line in, one line out: [previous, new] -> [[type, path], ...] as the registry's
 *  SchemaDiff.compare(STRICT, previous, new) gives them, or {"error": ...}. Schemas are
 *  loaded as JsonSchema.loadPreviousDraft loads them (defaults on, draft 7 unless $schema). */
public class DiffMain {
  static Schema load(Object raw) {
    if (raw instanceof Boolean) {
      return (Boolean) raw ? TrueSchema.builder().build() : FalseSchema.builder().build();
    }
    return SchemaLoader.builder().useDefaults(true).draftV7Support()
        .schemaJson((JSONObject) raw).build().load().build();
  }

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    String line;
    while ((line = in.readLine()) != null) {
      JSONArray pair = new JSONArray(line);
      try {
        JSONArray out = new JSONArray();
        for (Difference d : SchemaDiff.compare(SchemaDiff.COMPATIBLE_CHANGES_STRICT,
            load(pair.get(0)), load(pair.get(1)))) {
          out.put(new JSONArray().put(d.getType().toString()).put(d.getJsonPath()));
        }
        System.out.println(out);
      } catch (Throwable e) {
        System.out.println(new JSONObject().put("error", e.toString()));
      }
    }
  }
}
