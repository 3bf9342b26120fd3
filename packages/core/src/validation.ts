// Turns bad input into errors that name the user's field, the value and the fix, the shape every
// portable-lb input error takes so that `pulumi preview` says exactly what to change. Problems are
// collected, not thrown one by one, so a run reports every mistake at once.
import * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { nearestName } from "./nearestName.ts";

/**
 * Bad input: one problem per line. A pulumi.RunError, so Pulumi prints the message alone, without a
 * stack trace, as it prints its own errors.
 */
export class ConfigError extends pulumi.RunError {
  override name = "ConfigError";
  readonly problems: string[];

  constructor(problems: string | string[]) {
    const list = typeof problems === "string" ? [problems] : problems;
    super(list.join("\n"));
    this.problems = list;
  }
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v = input;
  for (const key of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

function fieldName(prefix: string, path: PropertyKey[]): string {
  return path.reduce<string>(
    (acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc ? `${acc}.${String(key)}` : String(key)),
    prefix,
  );
}

/** How a value is shown after the message: what the user wrote, or that they wrote nothing. */
export function shown(value: unknown): string {
  return value === undefined ? "not set" : `got ${JSON.stringify(value)}`;
}

/** One problem line: `path: message (got value)`. */
export function problem(path: string, message: string, value: unknown): string {
  return `${path}: ${message} (${shown(value)})`;
}

const TYPE_WORDS: Record<string, string> = {
  string: "a string",
  boolean: "true or false",
  object: "an object",
  array: "a list",
  record: "an object",
};

/** "a whole number from 10 to 10000", read from the number schema itself so it cannot drift. */
function numberRule(schema: z.ZodNumber): string {
  const kind = schema.isInt ? "a whole number" : "a number";
  const min =
    schema.minValue !== null && Math.abs(schema.minValue) < Number.MAX_SAFE_INTEGER
      ? schema.minValue
      : undefined;
  const max =
    schema.maxValue !== null && Math.abs(schema.maxValue) < Number.MAX_SAFE_INTEGER
      ? schema.maxValue
      : undefined;
  if (min !== undefined && max !== undefined) return `${kind} from ${min} to ${max}`;
  if (min !== undefined) return `${kind} of at least ${min}`;
  if (max !== undefined) return `${kind} of at most ${max}`;
  return kind;
}

type RawIssue = z.core.$ZodRawIssue & { schema?: z.core.$ZodType };

function isNumberSchema(schema: unknown): schema is z.ZodNumber {
  return (schema as z.ZodNumber | undefined)?.def?.type === "number";
}

/**
 * Our wording for zod's issues, where a schema gave none of its own: the accepted range or values
 * and the fix. Unknown keys get one line per key (parse() splits them), each with the nearest
 * known key.
 */
function describeIssue(issue: RawIssue): string | undefined {
  const schema = issue.schema;
  const missing = issue.input === undefined;
  if (isNumberSchema(schema)) {
    const rule = numberRule(schema);
    return missing ? `is required; set ${rule}` : `must be ${rule}`;
  }
  switch (issue.code) {
    case "invalid_type":
      if (missing) return "is required";
      return `must be ${TYPE_WORDS[issue.expected] ?? issue.expected}`;
    case "invalid_value": {
      const values = issue.values.map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
      const near =
        typeof issue.input === "string"
          ? nearestName(
              issue.input,
              issue.values.filter((v): v is string => typeof v === "string"),
            )
          : undefined;
      if (missing) return `is required; set one of: ${values.join(", ")}`;
      return `must be one of: ${values.join(", ")}${near ? `; did you mean "${near}"?` : ""}`;
    }
    case "unrecognized_keys": {
      const known = Object.keys((schema as z.ZodObject | undefined)?.shape ?? {});
      return issue.keys
        .map((key) => {
          const near = nearestName(key, known);
          return near
            ? `is not a known key; did you mean "${near}"?`
            : `is not a known key; use one of: ${known.join(", ")}`;
        })
        .join("\n");
    }
    case "too_small":
      if (issue.origin === "array") return `needs at least ${String(issue.minimum)} entries`;
      if (issue.origin === "string") return "must not be empty";
      return undefined;
    default:
      return undefined;
  }
}

/** The problems of `input` against `schema`, each as a `problem` line under `prefix`; none when valid. */
export function schemaProblems<S extends z.ZodType>(
  schema: S,
  input: unknown,
  prefix: string,
): { data: z.output<S>; problems: [] } | { data?: undefined; problems: string[] } {
  const result = schema.safeParse(input, { error: describeIssue });
  if (result.success) return { data: result.data, problems: [] };
  const problems = result.error.issues.flatMap((issue) => {
    if (issue.code === "unrecognized_keys") {
      const lines = issue.message.split("\n");
      return issue.keys.map((key, i) => {
        const path = [...issue.path, key];
        return problem(fieldName(prefix, path), lines[i] ?? lines[0]!, valueAt(input, path));
      });
    }
    return [problem(fieldName(prefix, issue.path), issue.message, valueAt(input, issue.path))];
  });
  return { problems };
}

/** Parses `input` with `schema`, or throws one ConfigError listing every problem, one per line. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, prefix: string): z.output<S> {
  const { data, problems } = schemaProblems(schema, input, prefix);
  if (problems.length) throw new ConfigError(problems);
  return data as z.output<S>;
}

/** Parses `input` with `schema`, adding its problems to `into`; the parsed value, or undefined. */
export function collectParsed<S extends z.ZodType>(
  into: string[],
  schema: S,
  input: unknown,
  prefix: string,
): z.output<S> | undefined {
  const { data, problems } = schemaProblems(schema, input, prefix);
  into.push(...problems);
  return data;
}

/**
 * Runs a check that throws ConfigError and adds its problems to `into`, so one run collects every
 * check's problems; returns the check's result, or undefined when it found any.
 */
export function collect<T>(into: string[], check: () => T): T | undefined {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    into.push(...err.problems);
    return undefined;
  }
}
