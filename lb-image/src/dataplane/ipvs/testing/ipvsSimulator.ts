// ipvsadm's command semantics over IpvsState, for property tests: adding what exists or touching
// what does not is an error, as in the kernel, and a real server is added at the head of its
// service's list (list_add in ip_vs_ctl.c), which is the order ip_vs_mh builds its table in. The
// QEMU conformance test checks the same batches against real IPVS, which keeps this model honest.
import { backendKey, serviceKey } from "../../model.ts";
import { parseCommand } from "../ipvsadmSave.ts";
import { inCanonicalOrder, sortIpvs, type IpvsServer, type IpvsService } from "../ipvsState.ts";

/** A service with its servers in the kernel's list order (head first). */
type Listed = IpvsService;

export function simulate(state: IpvsService[], commands: string[]): IpvsService[] {
  return readBack(simulateKernel(state.map(listed), commands));
}

/** What a read of the kernel gives (ipvsadm -Sn sorted, the order judged from /proc/net/ip_vs). */
export function readBack(kernel: IpvsService[]): IpvsService[] {
  return sortIpvs(kernel.map(withOrder));
}

/** The services after `commands`, each server list in kernel order (the last added first). */
export function simulateKernel(kernel: IpvsService[], commands: string[]): IpvsService[] {
  const services = new Map<string, Listed>(
    kernel.map((s) => [serviceKey(s), { ...s, servers: [...s.servers] }]),
  );
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
        inOrder: true,
      });
      continue;
    }
    if (!existing) throw new Error(`${op} of a missing service: ${line}`);
    if (op === "-E")
      Object.assign(existing, { scheduler: service.scheduler ?? "wlc", flags: service.flags ?? [] });
    else if (op === "-D") services.delete(key);
    else {
      const at = existing.servers.findIndex((r) => backendKey(r) === backendKey(server!));
      const updated = (): IpvsServer => ({
        ip: server!.ip,
        port: server!.port,
        weight: server!.weight ?? 1,
        method: server!.method ?? "gate",
      });
      if (op === "-a") {
        if (at >= 0) throw new Error(`-a of an existing server: ${line}`);
        existing.servers.unshift(updated());
      } else if (at < 0) throw new Error(`${op} of a missing server: ${line}`);
      else if (op === "-e") existing.servers[at] = updated();
      else existing.servers.splice(at, 1);
    }
  }
  return [...services.values()];
}

/**
 * A state as the kernel would list it: in order, its servers as canonical adds leave them; out of
 * order, with the first two swapped.
 */
export function listed(s: IpvsService): Listed {
  const servers = sortIpvs([s])[0]!.servers.reverse();
  if (!s.inOrder && servers.length > 1) servers.splice(0, 2, servers[1]!, servers[0]!);
  return { ...s, servers };
}

function withOrder(s: Listed): IpvsService {
  return { ...s, inOrder: inCanonicalOrder(s.scheduler, s.servers.map(backendKey)) };
}
