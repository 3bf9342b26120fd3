// The root program's input: every `portable-lb:` setting of the stack, checked in one pass before
// anything is created, and the cluster of a kubeconfig environment asked whether it answers. Every
// problem is reported at once, with the paths the user writes (`loadBalancer.bgp.bfd.minRxMs`), as
// one ConfigError, which Pulumi prints without a stack trace.
import * as pulumi from "@pulumi/pulumi";
import {
  ConfigError,
  clusterInputProblems,
  collect,
  collectParsed,
  ipv4Cidr,
  nearestName,
  networkPlanSchema,
  problem,
  schemaProblems,
  type EnvironmentFacts,
} from "@portable-lb/core";
import { labEnvironmentSchema, labPlan } from "@portable-lb/lab";
import {
  environmentSchemaWith,
  planEnvironment,
  planFacts,
  probeCluster,
  readKubeconfig,
  SSH_KEY_REQUIRED,
  unreachableSshHosts,
  type KubeconfigFile,
} from "@portable-lb/providers";
import { z } from "zod";

/** The settings the root program reads (index.ts says what each is). */
export const STACK_SETTINGS = [
  "environment",
  "network",
  "loadBalancer",
  "routing",
  "flannel",
  "bgpPassword",
  "sshPrivateKey",
  "skipAwait",
  "demoApp",
] as const;

// The lab's own schema, made strict here: its package keeps the lenient one for its callers.
const environmentSchema = environmentSchemaWith(z.strictObject(labEnvironmentSchema.shape));

const otherSettingsSchema = z.strictObject({
  skipAwait: z.boolean().optional(),
  demoApp: z.strictObject({ replicas: z.number().int().min(1).max(20) }).optional(),
});

/** A setting's value as the stack holds it: JSON for objects, numbers and booleans, else the string. */
function settingValue(config: pulumi.Config, key: string): unknown {
  const raw = config.get(key);
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

function unknownSettings(config: pulumi.Config): string[] {
  const prefix = `${config.name}:`;
  // The key is what is wrong; its value is left out, as it may be a secret.
  return Object.keys(pulumi.runtime.allConfig())
    .filter((key) => key.startsWith(prefix))
    .map((key) => key.slice(prefix.length))
    .filter((name) => !(STACK_SETTINGS as readonly string[]).includes(name))
    .map((name) => {
      const near = nearestName(name, STACK_SETTINGS);
      const fix = near ? `did you mean "${near}"?` : `use one of: ${STACK_SETTINGS.join(", ")}`;
      return `${name}: is not a ${config.name} setting; ${fix}`;
    });
}

export type Probe = (kubeconfig: KubeconfigFile) => Promise<string | undefined>;

/**
 * Checks every setting; throws one ConfigError listing every problem. A cluster that does not answer
 * is a warning in a preview (the user may be offline) and a problem in an update.
 */
export async function checkStackInput(config: pulumi.Config, probe: Probe = probeCluster): Promise<void> {
  const problems = unknownSettings(config);
  const rawEnvironment = settingValue(config, "environment");
  if (rawEnvironment === undefined)
    problems.push(
      problem(
        "environment",
        "is required; run 'pulumi config set --path environment.kind kubeconfig' and 'pulumi config set --path environment.kubeconfig <path>'",
        undefined,
      ),
    );
  const environment =
    rawEnvironment === undefined
      ? undefined
      : collectParsed(problems, environmentSchema, rawEnvironment, "environment");
  const network = settingValue(config, "network");
  const loadBalancer = settingValue(config, "loadBalancer");

  let facts: EnvironmentFacts | undefined;
  let reflectors: { node: string; address: string }[] | undefined;
  let kubeconfig: KubeconfigFile | undefined;
  if (environment?.kind === "kubeconfig") {
    facts = environment;
    kubeconfig = collect(problems, () => readKubeconfig(environment.kubeconfig));
  } else if (environment && environment.kind !== "lab") {
    // The machines it will make need only the node network (a bad one is reported below), so the
    // checks against them run even when another network field is wrong.
    const nodeCidr = schemaProblems(ipv4Cidr, (network as { nodeCidr?: unknown } | null)?.nodeCidr, "").data;
    const planned = nodeCidr && collect(problems, () => planEnvironment(environment, nodeCidr));
    if (planned) facts = planFacts(planned);
    if (environment.kind === "onprem") {
      if (config.get("sshPrivateKey") === undefined) problems.push(SSH_KEY_REQUIRED);
      // A machine SSH cannot reach is named now, before the others' commands would run.
      problems.push(...(await unreachableSshHosts(environment)));
    }
  } else if (environment?.kind === "lab") {
    // The lab's routers, reflectors and LB image follow from its plan; a bad network is reported below.
    const plan = schemaProblems(networkPlanSchema, network, "network").data;
    const lab = plan && collect(problems, () => labPlan(environment, plan));
    if (lab) {
      // The lab brings its own LB image (its build is checked when the lab is created).
      const lbImage = "the lab's build";
      facts = {
        platform: "lab",
        bgp: { routers: [lab.router.ip] },
        lbNodeCount: environment.lbNodes,
        lbImage,
      };
      reflectors = lab.reflectors;
    }
  }
  const lb =
    reflectors && loadBalancer !== null && typeof loadBalancer === "object"
      ? { routeReflectors: reflectors, ...loadBalancer }
      : loadBalancer;
  problems.push(
    ...clusterInputProblems(
      {
        network,
        loadBalancer: lb,
        routing: settingValue(config, "routing"),
        flannel: settingValue(config, "flannel"),
      },
      facts,
    ),
  );
  collectParsed(
    problems,
    otherSettingsSchema,
    { skipAwait: settingValue(config, "skipAwait"), demoApp: settingValue(config, "demoApp") },
    "",
  );

  const unanswered = kubeconfig && (await probe(kubeconfig));
  if (unanswered) {
    if (pulumi.runtime.isDryRun()) void pulumi.log.warn(unanswered);
    else problems.push(unanswered);
  }
  if (problems.length) throw new ConfigError(problems);
}
