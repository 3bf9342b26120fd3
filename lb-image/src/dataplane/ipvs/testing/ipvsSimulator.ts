// ipvsadm's command semantics over IpvsState, for property tests: adding what exists or touching
// what does not is an error, as in the kernel. The QEMU conformance test checks the same batches
// against real IPVS, which keeps this model honest.
import { backendKey, serviceKey } from "../../model.ts";
import { parseCommand } from "../ipvsadmSave.ts";
import { sortIpvs, type IpvsService } from "../ipvsState.ts";

export function simulate(state: IpvsService[], commands: string[]): IpvsService[] {
  const services = new Map(state.map((s) => [serviceKey(s), { ...s, servers: [...s.servers] }]));
  for (const line of commands) {
    const { op, service, server } = parseCommand(line);
    const key = serviceKey(service);
    const existing = services.get(key);
    if (op === "-A") {
      if (existing) throw new Error(`-A of an existing service: ${line}`);
      services.set(key, {
        ...service,
        scheduler: service.scheduler ?? "wlc",
        flags: service.flags ?? [],
        servers: [],
      });
      continue;
    }
    if (!existing) throw new Error(`${op} of a missing service: ${line}`);
    if (op === "-E")
      Object.assign(existing, { scheduler: service.scheduler ?? "wlc", flags: service.flags ?? [] });
    else if (op === "-D") services.delete(key);
    else {
      const at = existing.servers.findIndex((r) => backendKey(r) === backendKey(server!));
      if (op === "-a") {
        if (at >= 0) throw new Error(`-a of an existing server: ${line}`);
        existing.servers.push({
          ip: server!.ip,
          port: server!.port,
          weight: server!.weight ?? 1,
          method: server!.method ?? "gate",
        });
      } else if (at < 0) throw new Error(`${op} of a missing server: ${line}`);
      else if (op === "-e")
        existing.servers[at] = {
          ...existing.servers[at]!,
          weight: server!.weight ?? 1,
          method: server!.method ?? "gate",
        };
      else existing.servers.splice(at, 1);
    }
  }
  return sortIpvs([...services.values()]);
}
