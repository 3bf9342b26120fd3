// IPVS where the kernel has it, else nftables; either can be forced by config.
import { existsSync } from "node:fs";
import type { DataPlaneEngine } from "./engine.ts";
import { IpvsEngine } from "./ipvs/ipvsEngine.ts";
import { NftEngine } from "./nft/nftEngine.ts";

/** /proc/net/ip_vs exists once the ip_vs module is loaded in the kernel. */
export function kernelHasIpvs(procPath = "/proc/net/ip_vs"): boolean {
  return existsSync(procPath);
}

export interface EngineCommands {
  ipvsadm: [string, ...string[]];
  nft: [string, ...string[]];
  ip?: [string, ...string[]];
}

export function chooseEngine(
  mode: "auto" | "ipvs" | "nftables",
  hasIpvs = kernelHasIpvs(),
  commands: EngineCommands = { ipvsadm: ["ipvsadm"], nft: ["nft"] },
): DataPlaneEngine {
  if (mode === "ipvs" || (mode === "auto" && hasIpvs)) return new IpvsEngine(commands.ipvsadm);
  return new NftEngine(commands.nft, commands.ip);
}
