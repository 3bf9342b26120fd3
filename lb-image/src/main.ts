// The LB pod's controller process: `portable-lb-controller --config /etc/portable-lb/config.json`.
import { hostname } from "node:os";
import { LB_COMMANDS, LB_PATHS } from "@portable-lb/core/config";
import { runProcess } from "./common/processMain.ts";
import { startController } from "./controller/controller.ts";

runProcess(LB_COMMANDS.controller, async ({ config, kubeconfig, log }) => {
  const controller = await startController({
    config,
    kubeconfig,
    log,
    namespace: process.env.POD_NAMESPACE ?? "portable-lb-system",
    identity: process.env.POD_NAME ?? hostname(),
    ...(process.env.POD_UID && { podUid: process.env.POD_UID }),
    ...(process.env.NODE_NAME && { nodeName: process.env.NODE_NAME }),
    // The downward API gives both (see the pod spec); without them there is nothing to announce.
    ...(process.env.POD_IP &&
      process.env.HOST_IP && {
        speaker: {
          podIp: process.env.POD_IP,
          nodeIp: process.env.HOST_IP,
          // Shared with the speaker container (an emptyDir both mount).
          runDir: LB_PATHS.birdRunDir,
        },
      }),
  });
  // The rules stay: the pod's network namespace goes away with the pod, and until then draining
  // connections still need them.
  return () => controller.stop();
});
