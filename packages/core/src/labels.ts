// The recommended Kubernetes labels on everything portable-lb creates, so `kubectl get -l
// app.kubernetes.io/part-of=portable-lb` finds all of it.
export const PART_OF = "portable-lb";

export function standardLabels(
  component: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    "app.kubernetes.io/part-of": PART_OF,
    "app.kubernetes.io/managed-by": "pulumi",
    "app.kubernetes.io/component": component,
    ...extra,
  };
}
