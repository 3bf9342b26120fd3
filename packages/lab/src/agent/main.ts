// The lab node agent's process: run inside a node's network namespace, e.g.
//   ip netns exec lab-node1 node packages/lab/src/agent/main.ts \
//     --node-name node1 --node-ip 192.168.100.11 --kubeconfig lab.kubeconfig \
//     --state-dir /var/lib/lab/node1 --node-root /var/lib/lab/node1/root
// JSON logs (pino) on stdout. SIGTERM/SIGINT stop every pod and remove what the agent made, then
// exit 0; exit 2 on bad flags, 1 when start-up fails.
import { pino } from "pino";
import { LabAgent } from "./labAgent.ts";
import { OptionsError, parseAgentOptions, type AgentOptions } from "./agentOptions.ts";

let options: AgentOptions;
try {
  options = parseAgentOptions(process.argv.slice(2), process.env);
} catch (err) {
  if (!(err instanceof OptionsError)) throw err;
  console.error(`lab agent: ${err.message}`);
  process.exit(2);
}
const log = pino({ base: { component: "lab-agent", node: options.nodeName }, level: options.logLevel });
let agent: LabAgent | undefined;
let stopping = false;

// Installed first: a start-up that waits (for the API server, for a podCIDR) must still stop cleanly.
const shutdown = (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "stopping");
  void (agent?.stop() ?? Promise.resolve()).then(
    () => process.exit(0),
    (err: unknown) => {
      log.error({ err }, "stop failed");
      process.exit(1);
    },
  );
};
process.once("SIGTERM", () => shutdown("SIGTERM"));
process.once("SIGINT", () => shutdown("SIGINT"));

async function main(o: AgentOptions): Promise<void> {
  agent = await LabAgent.create(o, log);
  if (stopping) return agent.stop();
  await agent.run();
  if (!stopping) log.info("running");
}

main(options).catch(async (err: unknown) => {
  log.fatal({ err }, "the lab agent failed to start");
  await agent?.stop().catch(() => undefined);
  process.exit(1);
});
