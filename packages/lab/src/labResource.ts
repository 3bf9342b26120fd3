// The lab's building blocks as Pulumi resources: each is a dynamic resource whose provider loads an
// ops module (ops/*.ts) that makes, checks and removes one piece of the lab on this machine. Only
// the module's path is captured in the serialized provider, so Pulumi never serializes the lab's
// code, and the ops run with the repository's own modules.
//
// Inputs are one `spec` (plain data). A changed spec replaces the piece (delete first: the names
// and addresses are the same); so does a piece found dead on the next `up` (its daemons gone after
// a reboot, say), which is how a second `up` repairs the lab instead of trusting stale state. A piece
// whose ops can heal it (a node's dead kubelet, the control plane's dead etcd) is updated in place
// instead, so nothing that depends on it is remade.
import * as pulumi from "@pulumi/pulumi";
import type * as nodeUtil from "node:util";
import { extname, join } from "node:path";

/** What an ops module exports. `State` is what `remove` and `healthy` need later (pids, folders). */
export interface LabOps<Spec, State> {
  create(spec: Spec): Promise<State>;
  /** Whether the piece still exists and runs; false makes the next `up` replace it. */
  healthy(spec: Spec, state: State): boolean | Promise<boolean>;
  /**
   * Whether `update` can bring the piece to `news` in place (heal what died, apply a changed spec)
   * rather than by making it afresh; without `update`, every change replaces.
   */
  updatable?(olds: Spec, news: Spec, state: State): boolean | Promise<boolean>;
  /** Brings the piece to `spec` in place, keeping everything that depends on it as it is. */
  update?(olds: Spec, spec: Spec, state: State): Promise<State>;
  /** Removes everything `create` made; idempotent, and fine with a half-made piece. */
  remove(spec: Spec, state: State | undefined): void | Promise<void>;
}

/** The ops module `name` beside this file (ops/<name>.ts in the sources, .js once built). */
export function opsModule(name: string): string {
  return join(__dirname, "ops", `${name}${extname(__filename)}`);
}

interface Props {
  spec: unknown;
  state?: unknown;
}

function provider(module: string): pulumi.dynamic.ResourceProvider {
  // Everything is required inside: Pulumi serializes these functions, and a module required at
  // run time is loaded in the provider's process instead of being serialized.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const load = () => require(module) as LabOps<unknown, unknown>;
  const same = (a: unknown, b: unknown) => (require("node:util") as typeof nodeUtil).isDeepStrictEqual(a, b);
  return {
    async create(inputs: Props) {
      const state = await load().create(inputs.spec);
      return { id: `${Date.now().toString(36)}`, outs: { spec: inputs.spec, state } };
    },
    async diff(_id: string, olds: Props, news: Props) {
      // In a preview an input that waits on another piece is unknown: no ops can judge it yet (the
      // update diffs again with it known).
      const UNKNOWN = (require("@pulumi/pulumi") as typeof pulumi).runtime.unknownValue;
      const unknown = (v: unknown): boolean =>
        v === UNKNOWN || (typeof v === "object" && v !== null && Object.values(v).some(unknown));
      /* eslint-enable @typescript-eslint/no-require-imports */
      if (news.spec === undefined || unknown(news.spec)) return { changes: true };
      const ops = load();
      const changed = !same(olds.spec, news.spec);
      if (!changed && (await ops.healthy(olds.spec, olds.state))) return { changes: false };
      // An update works in place; a replacement would remake everything that depends on the piece.
      if (ops.update && (await ops.updatable?.(olds.spec, news.spec, olds.state))) return { changes: true };
      return { changes: true, replaces: [changed ? "spec" : "state"], deleteBeforeReplace: true };
    },
    async update(_id: string, olds: Props, news: Props) {
      const state = await load().update!(olds.spec, news.spec, olds.state);
      return { outs: { spec: news.spec, state } };
    },
    async delete(_id: string, props: Props) {
      await load().remove(props.spec, props.state);
    },
  };
}

/** One piece of the lab; `state` holds what its ops module reported. */
export class LabResource<State> extends pulumi.dynamic.Resource {
  declare readonly state: pulumi.Output<State>;

  constructor(
    type: string,
    name: string,
    ops: string,
    spec: pulumi.Input<unknown>,
    opts?: pulumi.CustomResourceOptions,
  ) {
    const options = { ...opts, deleteBeforeReplace: true };
    super(provider(opsModule(ops)), name, { spec, state: undefined }, options, "lab", type);
  }
}
