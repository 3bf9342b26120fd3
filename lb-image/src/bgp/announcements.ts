// Which VIPs this LB pod announces, as a pure function of what its data plane holds: a VIP is
// announced only while at least one of its services has a backend taking new flows (weight > 0),
// so routers never send traffic to a pod that would drop it. (Draining is SpeakerControl's.)
import type { VirtualService } from "../dataplane/model.ts";

export function announcedVips(services: VirtualService[]): string[] {
  const vips = new Set<string>();
  for (const s of services) if (s.backends.some((b) => b.weight > 0)) vips.add(s.vip);
  return [...vips].sort();
}
