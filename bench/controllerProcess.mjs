// The controller under test, in a process of its own so that its memory is measured without the
// benchmark's: the real startController from the built lb-image (dist, as the pod runs it), with its
// data plane (nft, ip) run inside a network namespace through `ip netns exec`, JSON logs at info on
// stdout (the benchmark reads "data plane updated" from them). Started by bench/reconcile.ts:
//   node bench/controllerProcess.mjs --config C.json --kubeconfig K --netns NS --port P [--namespace N]
// JavaScript on purpose: a .ts entry makes Node load its TypeScript stripper (~15 MB more RSS) into
// the very process whose memory is measured.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import { pino } from "pino";
import { startController } from "../lb-image/dist/controller/controller.js";

const { values } = parseArgs({
  options: {
    config: { type: "string" },
    kubeconfig: { type: "string" },
    netns: { type: "string" },
    port: { type: "string" },
    namespace: { type: "string", default: "portable-lb-system" },
  },
});
const { config, kubeconfig, netns, port } = values;
if (!config || !kubeconfig || !netns || !port) {
  console.error("usage: controllerProcess.mjs --config C --kubeconfig K --netns NS --port P [--namespace N]");
  process.exit(2);
}
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const controller = await startController({
  config: lbConfigSchema.parse(JSON.parse(readFileSync(config, "utf8"))),
  kubeconfig: kc,
  log: pino({ level: "info", base: { component: "controller" } }),
  namespace: values.namespace,
  identity: `bench-${process.pid}`,
  commandPrefix: ["ip", "netns", "exec", netns],
  httpPort: Number(port),
  httpHost: "127.0.0.1",
});
// A normal exit on SIGTERM, so that `node --cpu-prof` writes its profile.
process.once("SIGTERM", () => void controller.stop().finally(() => process.exit(0)));
