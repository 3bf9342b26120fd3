// Reads the engine's table back from `nft -a -n -s list table ip portable_lb`, and the per-service
// connection counters from `nft -n list map ip portable_lb services`, line by line as nft prints
// them. Text, not `nft -j`: at 10,000 services the table holds 2.5 M lookup slots, which as one JSON
// document is a ~150 MB string and ~1 GB of parsed objects in the controller; fed line by line, the
// parser holds one service's line at a time and shares one string per backend across its slots.
//
// Strict: it recognises exactly the table the engine makes (the dispatch map, the three base chains
// with their hook, priority, policy and one rule, and svc_ chains with one rule each) and reports
// anything else as drift, never by throwing: a table it cannot make sense of is replaced.
import { driftOf, type Drift } from "../drift.ts";
import { serviceKey, type VipCounter } from "../model.ts";
import { BASE_CHAINS, FLOW_HASH_SEED, SERVICES_MAP_LISTED, baseChainListed } from "./nftRuleset.ts";
import { NFT_TABLE, lookupTable, objectId, sortNft, type NftService } from "./nftState.ts";

export interface DispatchEntry {
  service: Pick<NftService, "protocol" | "vip" | "port">;
  chain: string;
  connections: number;
}

/** What a full read found: the services as they stand, drift, and the handle of each chain's one rule. */
export interface NftRead {
  services: NftService[];
  drift: Drift[];
  /** Chain name → the handle of its one rule of ours (with `-a`), for the cheap check. */
  ruleHandles: Map<string, number>;
}

// `-n` prints protocols as numbers; names are accepted too.
const PROTOCOLS: Record<string, "tcp" | "udp"> = { "6": "tcp", "17": "udp", tcp: "tcp", udp: "udp" };
// One dispatch-map element: `10.0.0.1 . 6 . 80 [counter [packets P bytes B]] : goto svc_…`.
const ELEMENT =
  /^(\d{1,3}(?:\.\d{1,3}){3}) \. (\w+) \. (\d+)(?: counter(?: packets (\d+) bytes \d+)?)? : goto (\S+)$/;
// One lookup-table slot of a service rule: `7 : 10.244.1.5 . 8080`.
const SLOT = /^(\d+) : (\d{1,3}(?:\.\d{1,3}){3} \. \d+)$/;
// An object's first line inside the table: `chain svc_tcp_0a000001_80 { # handle 8`.
const OBJECT = /^(.+) (\S+) \{(?: # handle \d+)?$/;
const HANDLE = / # handle (\d+)$/;
const TABLE_LINE = new RegExp(`^table ip ${NFT_TABLE} \\{(?: # handle \\d+)?$`);

type Section =
  | { kind: "outside" }
  | { kind: "table" }
  | { kind: "map"; lines: number }
  | { kind: "elements" }
  | { kind: "base"; chain: (typeof BASE_CHAINS)[number]; header: boolean; rules: number }
  | { kind: "service"; chain: string; rules: { handle: number; labels: string[] | string }[] }
  | { kind: "skip" }
  | { kind: "done" };

/** Feeds on nft's text output one line at a time (no line breaks inside a line). */
export class NftTableParser {
  readonly #entries: DispatchEntry[] = [];
  readonly #chains = new Map<string, { labels: string[] | string; handle: number }>();
  readonly #baseSeen = new Set<string>();
  readonly #drift: Drift[] = [];
  /** One string per backend for all its slots in all services. */
  readonly #labels = new Map<string, string>();
  #section: Section = { kind: "outside" };
  #mapSeen = false;
  readonly ruleHandles = new Map<string, number>();

  line(text: string): void {
    const line = text.trim();
    const s = this.#section;
    if (s.kind === "elements") return this.#elements(line);
    if (line === "" || s.kind === "done") {
      if (line !== "") this.#drift.push(driftOf("unparseable", `nft: text after the table: ${line}`));
      return;
    }
    switch (s.kind) {
      case "outside":
        if (TABLE_LINE.test(line)) this.#section = { kind: "table" };
        else this.#drift.push(driftOf("unparseable", `nft: expected table ip ${NFT_TABLE}, got: ${line}`));
        return;
      case "table":
        return this.#object(line);
      case "skip":
        if (line === "}") this.#section = { kind: "table" };
        return;
      case "map":
        return this.#mapLine(s, line);
      case "base":
        return this.#baseLine(s, line);
      case "service":
        return this.#serviceLine(s, line);
    }
  }

  /** The services in the table as they stand, what differs from the engine's layout, and the rule handles. */
  result(): NftRead {
    const drift = [...this.#drift];
    if (this.#section.kind !== "done") drift.push(driftOf("unparseable", "nft: the listing ended early"));
    if (!this.#mapSeen) drift.push(driftOf("base", "nft: the services map is missing"));
    for (const c of BASE_CHAINS)
      if (!this.#baseSeen.has(c.name)) drift.push(driftOf("base", `nft: base chain ${c.name} is missing`));
    const services: NftService[] = [];
    const referenced = new Set<string>();
    for (const { service, chain } of this.#entries) {
      const expected = `svc_${objectId(service)}`;
      const found = this.#chains.get(chain);
      referenced.add(chain);
      if (chain !== expected || !found) {
        drift.push(
          driftOf(
            "foreign",
            `nft: services element ${JSON.stringify(service)} goes to ${chain}, not ${expected}`,
          ),
        );
        continue;
      }
      if (typeof found.labels === "string") {
        drift.push(driftOf("service", `nft: chain ${chain} ${found.labels}`, serviceKey(service)));
        services.push({ ...service, backends: [], slots: new Uint16Array(), broken: found.labels });
      } else {
        services.push({ ...service, ...lookupTable(found.labels) });
        this.ruleHandles.set(chain, found.handle);
      }
    }
    for (const chain of this.#chains.keys())
      if (!referenced.has(chain))
        drift.push(driftOf("foreign", `nft: chain ${chain} has no services element`));
    return { services: sortNft(services), drift, ruleHandles: this.ruleHandles };
  }

  /** The dispatch map's elements and what the listing so far showed wrong (a listing of the map alone). */
  dispatch(): { entries: DispatchEntry[]; drift: Drift[] } {
    const drift = [...this.#drift];
    if (!this.#mapSeen) drift.push(driftOf("base", "nft: the services map is missing"));
    return { entries: this.#entries, drift };
  }

  counters(): VipCounter[] {
    return this.#entries.map((e) => ({ ...e.service, connections: e.connections }));
  }

  #object(line: string): void {
    if (line === "}") {
      this.#section = { kind: "done" };
      return;
    }
    const m = OBJECT.exec(line);
    const [what, name] = m ? [m[1]!, m[2]!] : ["", ""];
    const base = BASE_CHAINS.find((c) => c.name === name);
    if (what === "map" && name === "services" && !this.#mapSeen) {
      this.#mapSeen = true;
      this.#section = { kind: "map", lines: 0 };
    } else if (what === "chain" && base && !this.#baseSeen.has(name)) {
      this.#baseSeen.add(name);
      this.#section = { kind: "base", chain: base, header: false, rules: 0 };
    } else if (what === "chain" && name.startsWith("svc_") && !this.#chains.has(name)) {
      this.#section = { kind: "service", chain: name, rules: [] };
    } else {
      this.#drift.push(
        driftOf(m ? "foreign" : "unparseable", `nft: ${m ? "foreign object" : "unexpected line"}: ${line}`),
      );
      this.#section = { kind: "skip" };
    }
  }

  #mapLine(s: Extract<Section, { kind: "map" }>, line: string): void {
    if (line === "}") {
      if (s.lines >= 0 && s.lines !== SERVICES_MAP_LISTED.length)
        this.#drift.push(driftOf("base", "nft: the services map's declaration changed"));
      this.#section = { kind: "table" };
    } else if (line.startsWith("elements = {")) {
      this.#section = { kind: "elements" };
      this.#elements(line.slice("elements = {".length).trim());
    } else if (line === SERVICES_MAP_LISTED[s.lines]) {
      s.lines++;
    } else if (s.lines >= 0) {
      this.#drift.push(driftOf("base", `nft: the services map has "${line}"`));
      s.lines = -1; // reported once
    }
  }

  #baseLine(s: Extract<Section, { kind: "base" }>, line: string): void {
    const { chain } = s;
    if (line === "}") {
      if (!s.header) this.#drift.push(driftOf("base", `nft: base chain ${chain.name} lost its hook`));
      if (s.rules !== 1)
        this.#drift.push(driftOf("base", `nft: base chain ${chain.name} holds its rule ${s.rules} times`));
      this.#section = { kind: "table" };
      return;
    }
    if (!s.header && line.startsWith("type ")) {
      s.header = true;
      if (line !== baseChainListed(chain))
        this.#drift.push(driftOf("base", `nft: base chain ${chain.name} changed: ${line}`));
      return;
    }
    const { rule, handle } = splitHandle(line);
    if (rule === chain.listed) {
      s.rules++;
      if (handle !== undefined) this.ruleHandles.set(chain.name, handle);
    } else this.#drift.push(driftOf("foreign", `nft: foreign rule in ${chain.name}: ${rule}`));
  }

  #serviceLine(s: Extract<Section, { kind: "service" }>, line: string): void {
    if (line !== "}") {
      const { rule, handle } = splitHandle(line);
      s.rules.push({ handle: handle ?? 0, labels: this.#rule(s.chain, rule) });
      return;
    }
    const [first] = s.rules;
    const labels =
      s.rules.length === 0
        ? "holds no rule"
        : s.rules.length > 1
          ? `holds ${s.rules.length} rules`
          : first!.labels;
    this.#chains.set(s.chain, { labels, handle: first?.handle ?? 0 });
    this.#section = { kind: "table" };
  }

  /** Part of `elements = { a, b,\n c }`: entries separated by ", ", the last closing with " }". */
  #elements(text: string): void {
    const last = text.endsWith("}");
    if (last) this.#section = { kind: "map", lines: SERVICES_MAP_LISTED.length };
    for (const part of (last ? text.slice(0, -1) : text).split(",")) {
      const element = part.trim();
      if (element === "") continue;
      const m = ELEMENT.exec(element);
      const protocol = m ? PROTOCOLS[m[2]!] : undefined;
      if (!m || !protocol) {
        this.#drift.push(driftOf("foreign", `nft: foreign services element "${element}"`));
        continue;
      }
      this.#entries.push({
        service: { vip: m[1]!, protocol, port: Number(m[3]) },
        chain: m[5]!,
        connections: Number(m[4] ?? 0),
      });
    }
  }

  /**
   * A service chain's one rule, as the backend label of each slot: `drop`, or a dnat through
   * `map { 0 : ip . port, … }`; a string says why it is not ours.
   */
  #rule(chain: string, line: string): string[] | string {
    if (line === "drop") return [];
    // `meta l4proto tcp` folds into the hash's `tcp sport` when nft prints the rule back.
    const head = `dnat ip to jhash ip saddr . ${chain.split("_")[1]} sport mod `;
    const mod = /^(\d+) seed (\S+) map \{ /.exec(line.slice(head.length));
    if (!line.startsWith(head) || !mod || mod[2] !== FLOW_HASH_SEED || !line.endsWith(" }"))
      return `does not hold a portable-lb backend map: ${line}`;
    const slots: string[] = [];
    let count = 0;
    for (const part of line.slice(head.length + mod[0].length, -" }".length).split(", ")) {
      const m = SLOT.exec(part);
      if (!m) return `has an unexpected slot "${part}"`;
      const label = m[2]!;
      let shared = this.#labels.get(label);
      if (shared === undefined) this.#labels.set(label, (shared = label));
      slots[Number(m[1])] = shared;
      count++;
    }
    if (count !== slots.length || count !== Number(mod[1])) return "has a lookup table with gaps";
    return slots;
  }
}

function splitHandle(line: string): { rule: string; handle: number | undefined } {
  const m = HANDLE.exec(line);
  return m ? { rule: line.slice(0, m.index), handle: Number(m[1]) } : { rule: line, handle: undefined };
}

/**
 * `nft -n list chains ip`: the chains of the engine's table, each with its header line (base chains'
 * `type … hook …`) or "" (regular chains). Other tables are not ours to judge.
 */
export function parseChainList(text: string): Map<string, string> {
  const chains = new Map<string, string>();
  let inTable = false;
  let chain: string | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("table ")) inTable = TABLE_LINE.test(line);
    else if (!inTable) continue;
    else if (line.startsWith("chain ")) chains.set((chain = line.slice("chain ".length).split(" ")[0]!), "");
    else if (chain !== undefined && line.startsWith("type ")) chains.set(chain, line);
    else if (line === "}" && chain !== undefined) chain = undefined;
    else if (line === "}") inTable = false;
  }
  return chains;
}

/** Parses a whole listing (tests and the small map listing; the engine streams the table). */
export function parseNftText(text: string): NftTableParser {
  const parser = new NftTableParser();
  for (const line of text.split("\n")) parser.line(line);
  return parser;
}
