// The node agent process: `portable-lb-node-agent --config /etc/portable-lb/config.json`, with
// NODE_NAME (downward API) and POD_NAMESPACE (the LB pods' namespace, its own).
import { LB_COMMANDS } from "@portable-lb/core/config";
import { runProcess } from "../common/processMain.ts";
import { startNodeAgent } from "./nodeAgent.ts";

runProcess(LB_COMMANDS.nodeAgent, async ({ config, kubeconfig, log }) => {
  const nodeName = process.env.NODE_NAME;
  if (!nodeName) throw new Error("NODE_NAME is not set; set it from spec.nodeName (downward API)");
  const agent = await startNodeAgent({
    config,
    kubeconfig,
    log,
    nodeName,
    namespace: process.env.POD_NAMESPACE ?? "portable-lb-system",
  });
  // The routes stay on stop: a restarting agent adopts them, and VIP traffic keeps flowing meanwhile.
  return () => agent.stop();
});
