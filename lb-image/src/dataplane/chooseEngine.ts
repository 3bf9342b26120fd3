// IPVS where the kernel has it and can masquerade for it, else nftables; either can be forced by
// config. IPVS's NAT mode needs net.ipv4.vs.conntrack=1 in the pod's network namespace for the
// engine's masquerade table to see its traffic (ipvs/ipvsSnat.ts). That sysctl exists only where
// ip_vs is loaded, and a pod sysctl the kernel lacks stops the pod from starting, so the pod spec
// sets it only when dataPlane.engine is ipvs (packages/core podSpec.ts); in auto, IPVS is chosen only
// when the sysctl is already on, else nftables, saying why.
import { existsSync } from "node:fs";
import type { DataPlaneEngine } from "./engine.ts";
import { run, withPrefix } from "./exec.ts";
import { IpvsEngine } from "./ipvs/ipvsEngine.ts";
import { NftEngine } from "./nft/nftEngine.ts";

export const IPVS_CONNTRACK_SYSCTL = "net.ipv4.vs.conntrack";

/** What the kernel offers the IPVS engine, as seen from the pod's network namespace. */
export interface IpvsSupport {
  /** /proc/net/ip_vs exists once the ip_vs module is loaded. */
  present: boolean;
  /** net.ipv4.vs.conntrack is 1 (IPVS hands its connections to conntrack, so nft can masquerade them). */
  conntrack: boolean;
}

/** Reads IPVS support, through `prefix` (e.g. `ip netns exec NS`) when given. */
export async function ipvsSupport(prefix: string[] = []): Promise<IpvsSupport> {
  const cat = (path: string) =>
    run([...withPrefix(prefix, "cat"), path]).then(
      (text) => text.trim(),
      () => undefined,
    );
  const present = prefix.length
    ? (await cat("/proc/net/ip_vs")) !== undefined
    : existsSync("/proc/net/ip_vs");
  if (!present) return { present, conntrack: false };
  return {
    present,
    conntrack: (await cat(`/proc/sys/${IPVS_CONNTRACK_SYSCTL.replaceAll(".", "/")}`)) === "1",
  };
}

export interface EngineChoice {
  engine: DataPlaneEngine;
  /** Why: "forced" (by config), "ipvs" (auto, IPVS usable), "no-ipvs", "ipvs-cannot-masquerade". */
  reason: "forced" | "ipvs" | "no-ipvs" | "ipvs-cannot-masquerade";
  /** For a fallback the operator should know about: what happened and how to get IPVS. */
  warning?: string;
}

export function chooseEngine(
  mode: "auto" | "ipvs" | "nftables",
  support: IpvsSupport,
  prefix: string[] = [],
): EngineChoice {
  const nft = () => new NftEngine(withPrefix(prefix, "nft"), withPrefix(prefix, "ip"));
  if (mode === "nftables") return { engine: nft(), reason: "forced" };
  if (mode === "ipvs") {
    // Forced: refuse to run rather than serve NAT-mode services whose replies go astray.
    if (!support.present)
      throw new Error(
        "dataPlane.engine is ipvs, but the kernel has no IPVS (/proc/net/ip_vs is missing): load the ip_vs module on the LB nodes, or set dataPlane.engine to auto or nftables",
      );
    if (!support.conntrack)
      throw new Error(
        `dataPlane.engine is ipvs, but ${IPVS_CONNTRACK_SYSCTL} is not 1 in the LB pod's network namespace, so NAT-mode services could not be masqueraded: the LB pod spec sets it with dataPlane.engine ipvs; allow it on the LB nodes' kubelets (allowedUnsafeSysctls), or set dataPlane.engine to nftables`,
      );
    return { engine: new IpvsEngine(prefix), reason: "forced" };
  }
  if (!support.present) return { engine: nft(), reason: "no-ipvs" };
  if (!support.conntrack)
    return {
      engine: nft(),
      reason: "ipvs-cannot-masquerade",
      warning: `the kernel has IPVS, but ${IPVS_CONNTRACK_SYSCTL} is not 1 in this pod's network namespace, so IPVS could not masquerade NAT-mode services: using nftables; set dataPlane.engine to ipvs (the pod spec then sets the sysctl) to use IPVS`,
    };
  return { engine: new IpvsEngine(prefix), reason: "ipvs" };
}
