// Apache Iceberg's REST catalog server on 127.0.0.1, for the REST tests of tests/lake:
// iceberg-core's own REST protocol implementation (RESTCatalogAdapter over a backend
// Catalog, RESTCatalogServlet; the pieces Iceberg's RESTCatalogServer test fixture wires,
// which listens on every interface at a fixed port) on Jetty, bound to loopback on a free
// port. The backend catalog is configured by system properties `catalog.<property>`
// (default catalog-impl: JdbcCatalog), e.g. -Dcatalog.uri=jdbc:sqlite:/tmp/rest.db
// -Dcatalog.warehouse=s3://bucket/wh -Dcatalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO.
// Prints "port N" once it listens; stops when its standard input closes.
//
//   javac -cp '.cache/iceberg-rest-jars/*' -d BUILD tests/lake/LoopbackRestCatalog.java
//   java -cp 'BUILD:.cache/iceberg-rest-jars/*' -Dcatalog.uri=... LoopbackRestCatalog

import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class LoopbackRestCatalog {
  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>();
    for (String name : System.getProperties().stringPropertyNames()) {
      if (name.startsWith("catalog.")) {
        props.put(name.substring("catalog.".length()), System.getProperty(name));
      }
    }
    props.putIfAbsent(CatalogProperties.CATALOG_IMPL, "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent("jdbc.schema-version", "V1");
    Catalog backend = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());

    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(backend))),
        "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.println("port " + connector.getLocalPort());
    System.out.flush();
    while (System.in.read() != -1) {
      // the test process holds our stdin; its end (or the process's) stops the server
    }
    server.stop();
    System.exit(0);
  }
}
