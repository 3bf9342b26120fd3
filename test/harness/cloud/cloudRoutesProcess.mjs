// The controller's cloud-routes part (startCloudRoutes from the built lb-image, as the pod runs it) in
// a process of its own, so tests can SIGKILL or SIGTERM it: it watches the Services through the
// controller's own ClusterWatch and reports every VIP of its group as served (the data plane, tested
// elsewhere, is left out). The AWS SDK finds the API through AWS_ENDPOINT_URL_EC2 (moto in tests);
// with --gcp-port the official compute clients go to the GCP routes contract fake on that port.
//   node cloudRoutesProcess.mjs --config C.json --kubeconfig K --namespace NS --identity POD --node NODE
//        [--server URL] [--gcp-port PORT]
// Logs JSON lines on stdout, the first saying on which loopback port its metrics are served
// (metricsPort); exits 0 after a graceful stop on SIGTERM.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import { pino } from "pino";
import { startCloudRoutes, routeVips } from "../../../lb-image/dist/cloudRoutes/cloudRoutes.js";
import { ClusterWatch } from "../../../lb-image/dist/controller/clusterWatch.js";
import { EventSink } from "../../../lb-image/dist/controller/eventSink.js";

const { values: a } = parseArgs({
  options: {
    config: { type: "string" },
    kubeconfig: { type: "string" },
    namespace: { type: "string" },
    identity: { type: "string" },
    node: { type: "string" },
    server: { type: "string" },
    "gcp-port": { type: "string" },
  },
});
if (!a.config || !a.kubeconfig || !a.namespace || !a.identity || !a.node) {
  console.error(
    "usage: cloudRoutesProcess.mjs --config C --kubeconfig K --namespace NS --identity POD --node NODE [--server URL]",
  );
  process.exit(2);
}
const kc = new KubeConfig();
kc.loadFromFile(a.kubeconfig);
if (a.server) kc.clusters = kc.clusters.map((c) => ({ ...c, server: a.server }));
const config = lbConfigSchema.parse(JSON.parse(readFileSync(a.config, "utf8")));
const log = pino({ level: "info", base: { pod: a.identity } });
const events = new EventSink(kc.makeApiClient(CoreV1Api), log);
const registry = new (await import("prom-client")).Registry();
const metrics = createServer((_, res) => void registry.metrics().then((text) => res.end(text)));
await new Promise((resolve) => metrics.listen(0, "127.0.0.1", resolve));
log.info({ metricsPort: metrics.address().port }, "metrics served");
const gcpClients = a["gcp-port"]
  ? await (await import("./gcpClients.ts")).gcpClientsFor(Number(a["gcp-port"]))
  : undefined;
const routes = await startCloudRoutes({
  config,
  kubeconfig: kc,
  log,
  namespace: a.namespace,
  identity: a.identity,
  nodeName: a.node,
  pod: { object: `${a.namespace}/${a.identity}`, kind: "Pod" },
  registry,
  report: (items, type) => events.report(items, type),
  gcpClients,
});
const watch = new ClusterWatch(kc, log, {
  onChange: () => {
    const vips = [...routeVips(config, [], watch.services()).cluster];
    routes.setVips(vips, watch.services());
  },
  onConnection: () => {},
});
await watch.start();
log.info("cloud routes running");
process.once(
  "SIGTERM",
  () =>
    void routes
      .stop()
      .then(() => watch.stop())
      .finally(() => {
        log.info("stopped");
        process.exit(0);
      }),
);
