// The backend node's reverse-path filter on the interfaces its pods' traffic arrives on. A DSR
// reply leaves the pod with the VIP as its source, and the node routes the VIP elsewhere (towards
// the LBs, or nowhere): strict mode (1) drops it, loose mode (2) only wants the source routable.
// The effective value is max(all, interface), so each of them that is strict becomes loose;
// 0 and 2 are left alone. This loosens a host setting (the README says so), and only where needed.
import { z } from "zod";

const netconfSchema = z.array(z.object({ interface: z.string(), rp_filter: z.string().optional() }).loose());
const routeGetSchema = z.array(z.object({ dev: z.string().optional() }).loose());

const STRICT = "strict";
export const LOOSE = 2;

/** The interfaces (`all` included) whose rp_filter must change from strict to loose. */
export function strictInterfaces(netconfJson: string, devices: string[]): string[] {
  const conf = netconfSchema.parse(JSON.parse(netconfJson || "[]"));
  return ["all", ...new Set(devices)].filter(
    (name) => conf.find((c) => c.interface === name)?.rp_filter === STRICT,
  );
}

/** rp_filter's values by the names `ip netconf` prints. */
const RP_FILTER_VALUES: Record<string, number> = { off: 0, strict: 1, loose: 2 };

/** Every interface's rp_filter as a number, from `ip -4 -j netconf show`. */
export function rpFilters(netconfJson: string): Map<string, number> {
  return new Map(
    netconfSchema
      .parse(JSON.parse(netconfJson || "[]"))
      .map((c) => [c.interface, RP_FILTER_VALUES[c.rp_filter ?? "off"] ?? 0]),
  );
}

/** Every interface `ip -4 -j netconf show` lists. */
export function allInterfaces(netconfJson: string): string[] {
  return netconfSchema.parse(JSON.parse(netconfJson || "[]")).map((c) => c.interface);
}

/** The device `ip -j route get ADDR` sends the address out of (where its packets come in from). */
export function routeDevice(json: string): string | undefined {
  return routeGetSchema.parse(JSON.parse(json || "[]"))[0]?.dev;
}
