// Turns zod issues into errors that name the field, the value and the fix, the shape every
// portable-lb input error takes so that `pulumi preview` says exactly what to change.
import type { z } from "zod";

export class ConfigError extends Error {
  override name = "ConfigError";
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

/** Parses `input` with `schema`, or throws one ConfigError listing every problem, one per line. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, prefix: string): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const value = valueAt(input, issue.path);
    const shown = value === undefined ? "nothing" : JSON.stringify(value);
    return `${fieldName(prefix, issue.path)}: ${issue.message} (got ${shown})`;
  });
  throw new ConfigError(lines.join("\n"));
}
