// Command-line front end of the local control plane, for working by hand and for the lab:
//   npm run control-plane -- up [--name N] [--port P] [--bind A] [--pod-cidr C] [--service-cidr C]
//                                                              prints the kubeconfig path
//   npm run control-plane -- down [--name N]
//   npm run control-plane -- status [--name N]
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  instancesRoot,
  readState,
  reapStale,
  startControlPlane,
  stopControlPlane,
  type ControlPlaneOptions,
} from "./controlPlane.ts";
import { runs } from "../processes.ts";

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      name: { type: "string", default: "default" },
      port: { type: "string" },
      bind: { type: "string" },
      "pod-cidr": { type: "string" },
      "service-cidr": { type: "string" },
    },
  });
  const dir = join(instancesRoot(), values.name);
  const verb = positionals[0] ?? "status";
  for (const line of await reapStale(instancesRoot())) console.error(line);
  const state = await readState(dir);

  switch (verb) {
    case "up": {
      if (state) {
        console.error(`control plane '${values.name}' is already running at ${state.server}`);
        console.log(state.kubeconfig);
        return;
      }
      const opts: ControlPlaneOptions = { dir };
      if (values.port) opts.apiserverPort = Number(values.port);
      if (values.bind) opts.bindAddress = values.bind;
      if (values["pod-cidr"]) opts.podCidr = values["pod-cidr"];
      if (values["service-cidr"]) opts.serviceCidr = values["service-cidr"];
      const started = await startControlPlane(opts);
      console.error(
        `control plane '${values.name}' ready at ${started.server}; use: export KUBECONFIG=${started.kubeconfig}`,
      );
      console.log(started.kubeconfig);
      return;
    }
    case "down":
      if (state) await stopControlPlane(state);
      console.error(`control plane '${values.name}' is stopped`);
      return;
    case "status":
      if (!state) {
        console.error(`control plane '${values.name}' is not running`);
        process.exitCode = 1;
        return;
      }
      for (const c of state.components)
        console.log(`${c.name}\tpid ${c.pid}\t${runs(c.pid, state.dir) ? "running" : "DEAD"}\t${c.log}`);
      console.log(`kubeconfig\t${state.kubeconfig}`);
      return;
    default:
      throw new Error(`unknown command '${verb}': use up, down or status`);
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
