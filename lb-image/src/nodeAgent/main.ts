// The node agent process: `portable-lb-node-agent --config /etc/portable-lb/config.json`, with
// NODE_NAME (downward API) and POD_NAMESPACE (the LB pods' namespace, its own); with
// DSR_NETNS_DIR (the runtime's pod netns directory, mounted) it also prepares DSR backends, with the
// fast path's decapsulation (the image's object) where the config runs it, and on a node with LB pods
// the fast path's node programs.
import { FAST_PATH_LOADER, LB_COMMANDS, LB_ENV, LB_PATHS, usesFastPath } from "@portable-lb/core/config";
import { runProcess } from "../common/processMain.ts";
import { startNodeAgent } from "./nodeAgent.ts";

runProcess(LB_COMMANDS.nodeAgent, async ({ config, kubeconfig, log }) => {
  const nodeName = process.env.NODE_NAME;
  if (!nodeName) throw new Error("NODE_NAME is not set; set it from spec.nodeName (downward API)");
  const netnsDir = process.env[LB_ENV.dsrNetnsDir];
  const agent = await startNodeAgent({
    config,
    kubeconfig,
    log,
    nodeName,
    namespace: process.env.POD_NAMESPACE ?? "portable-lb-system",
    ...(netnsDir && {
      dsr: {
        netnsDir,
        procSysNet: LB_PATHS.hostProcSysNet,
        ...(usesFastPath(config.dataPlane) && {
          decapObject: LB_PATHS.dsrDecapObject,
          fastPathBinary: FAST_PATH_LOADER,
        }),
      },
    }),
  });
  // The routes stay on stop: a restarting agent adopts them, and VIP traffic keeps flowing meanwhile.
  return () => agent.stop();
});
