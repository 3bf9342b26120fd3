// Reads the engine's state back from `nft -n list table ip portable_lb`, and the per-service
// connection counters from `nft -n list map ip portable_lb services`, line by line as nft prints
// them. Text, not `nft -j`: at 10,000 services the table holds 2.5 M lookup slots, which as one JSON
// document is a ~150 MB string and ~1 GB of parsed objects in the controller; fed line by line, the
// parser holds one service's line at a time and shares one string per backend across its slots.
import type { VipCounter } from "../model.ts";
import { lookupTable, sortNft, type NftService } from "./nftState.ts";

export class NftParseError extends Error {}

interface DispatchEntry {
  service: Pick<NftService, "protocol" | "vip" | "port">;
  chain: string;
  connections: number;
}

// `-n` prints protocols as numbers; names are accepted too.
const PROTOCOLS: Record<string, "tcp" | "udp"> = { "6": "tcp", "17": "udp", tcp: "tcp", udp: "udp" };
// One dispatch-map element: `10.0.0.1 . 6 . 80 [counter [packets P bytes B]] : goto svc_…`.
const ELEMENT =
  /^(\d{1,3}(?:\.\d{1,3}){3}) \. (\w+) \. (\d+)(?: counter(?: packets (\d+) bytes \d+)?)? : goto (\S+)$/;
// One lookup-table slot of a service rule: `7 : 10.244.1.5 . 8080`.
const SLOT = /^(\d+) : (\d{1,3}(?:\.\d{1,3}){3} \. \d+)$/;

/** Feeds on nft's text output one line at a time (no line breaks inside a line). */
export class NftTableParser {
  readonly #entries: DispatchEntry[] = [];
  readonly #tables = new Map<string, Pick<NftService, "backends" | "slots">>();
  /** One string per backend for all its slots in all services. */
  readonly #labels = new Map<string, string>();
  #section: "none" | "services" | "elements" | "chain" = "none";
  #chain = "";

  line(text: string): void {
    const line = text.trim();
    if (this.#section === "elements") {
      this.#elements(line);
      return;
    }
    if (line === "}") {
      this.#section = "none";
      return;
    }
    if (line === "map services {") this.#section = "services";
    else if (this.#section === "services" && line.startsWith("elements = {")) {
      this.#section = "elements";
      this.#elements(line.slice("elements = {".length).trim());
    } else if (line.startsWith("chain svc_")) {
      this.#section = "chain";
      this.#chain = line.slice("chain ".length, -" {".length);
    } else if (this.#section === "chain" && line !== "") {
      if (this.#tables.has(this.#chain)) throw new NftParseError(`nft: chain ${this.#chain} has two rules`);
      this.#tables.set(this.#chain, lookupTable(this.#rule(line)));
    }
  }

  /** The services in the table, or [] when it holds none. */
  services(): NftService[] {
    return sortNft(
      this.#entries.map(({ service, chain }) => {
        const table = this.#tables.get(chain);
        if (!chain.startsWith("svc_") || !table) {
          throw new NftParseError(
            `nft: services entry ${JSON.stringify(service)} does not go to a service chain with a rule`,
          );
        }
        return { ...service, ...table };
      }),
    );
  }

  counters(): VipCounter[] {
    return this.#entries.map((e) => ({ ...e.service, connections: e.connections }));
  }

  /** Part of `elements = { a, b,\n c }`: entries separated by ", ", the last closing with " }". */
  #elements(text: string): void {
    const last = text.endsWith("}");
    if (last) this.#section = "services";
    for (const part of (last ? text.slice(0, -1) : text).split(",")) {
      const element = part.trim();
      if (element === "") continue;
      const m = ELEMENT.exec(element);
      const protocol = m ? PROTOCOLS[m[2]!] : undefined;
      if (!m || !protocol) throw new NftParseError(`nft: unexpected services element "${element}"`);
      this.#entries.push({
        service: { vip: m[1]!, protocol, port: Number(m[3]) },
        chain: m[5]!,
        connections: Number(m[4] ?? 0),
      });
    }
  }

  /** A service chain's one rule, as the backend label of each slot: `drop`, or a dnat through `map { 0 : ip . port, … }`. */
  #rule(line: string): string[] {
    if (line === "drop") return [];
    const open = line.indexOf(" map { ");
    if (!line.startsWith("dnat ") || open < 0 || !line.endsWith(" }")) {
      throw new NftParseError(`nft: chain ${this.#chain} does not hold a portable-lb backend map: ${line}`);
    }
    const slots: string[] = [];
    let count = 0;
    for (const part of line.slice(open + " map { ".length, -" }".length).split(", ")) {
      const m = SLOT.exec(part);
      if (!m) throw new NftParseError(`nft: chain ${this.#chain} has an unexpected slot "${part}"`);
      const label = m[2]!;
      let shared = this.#labels.get(label);
      if (shared === undefined) this.#labels.set(label, (shared = label));
      slots[Number(m[1])] = shared;
      count++;
    }
    if (count !== slots.length) {
      throw new NftParseError(`nft: chain ${this.#chain} has a lookup table with gaps`);
    }
    return slots;
  }
}

/** Parses a whole listing (tests; the engine streams). */
export function parseNftText(text: string): NftTableParser {
  const parser = new NftTableParser();
  for (const line of text.split("\n")) parser.line(line);
  return parser;
}
