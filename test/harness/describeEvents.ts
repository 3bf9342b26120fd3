// The Events `kubectl describe` shows for an object. kubectl lists them with a field selector on the
// involved object's name, namespace, kind and uid (client-go's Events().GetFieldSelector, called by
// kubectl's describe), so an Event without the object's uid is not among them.
import type { CoreV1Api, CoreV1Event, V1ObjectMeta } from "@kubernetes/client-node";

export async function describeEvents(
  core: CoreV1Api,
  kind: string,
  obj: { metadata?: V1ObjectMeta },
): Promise<CoreV1Event[]> {
  const { name, namespace, uid } = obj.metadata ?? {};
  if (!name || !namespace || !uid) throw new Error(`describeEvents: ${kind} without name, namespace or uid`);
  const fieldSelector = [
    `involvedObject.name=${name}`,
    `involvedObject.namespace=${namespace}`,
    `involvedObject.kind=${kind}`,
    `involvedObject.uid=${uid}`,
  ].join(",");
  return (await core.listNamespacedEvent({ namespace, fieldSelector })).items;
}
