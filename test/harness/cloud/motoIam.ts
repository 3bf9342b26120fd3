// IAM in moto's server: users with inline policies and access keys, then enforcement switched on
// (POST /moto-api/reset-auth), after which moto checks every request's signature against those keys
// and its action against the user's policies, answering AccessDenied as IAM does. moto evaluates
// actions only (every request's resource is "*"), so policies here list actions on "*".
import {
  CreateAccessKeyCommand,
  CreateUserCommand,
  IAMClient,
  PutUserPolicyCommand,
} from "@aws-sdk/client-iam";
import { MOTO_CREDENTIALS, MOTO_REGION, type MotoServer } from "./motoServer.ts";

export interface MotoUser {
  arn: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
}

/** A user allowed exactly `actions` (on every resource), with an access key. */
export async function motoUser(moto: MotoServer, name: string, actions: string[]): Promise<MotoUser> {
  const iam = new IAMClient({ endpoint: moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  try {
    const user = await iam.send(new CreateUserCommand({ UserName: name }));
    await iam.send(
      new PutUserPolicyCommand({
        UserName: name,
        PolicyName: `${name}-policy`,
        PolicyDocument: JSON.stringify({
          Version: "2012-10-17",
          Statement: [{ Effect: "Allow", Action: actions, Resource: "*" }],
        }),
      }),
    );
    const key = (await iam.send(new CreateAccessKeyCommand({ UserName: name }))).AccessKey!;
    return {
      arn: user.User!.Arn!,
      credentials: { accessKeyId: key.AccessKeyId!, secretAccessKey: key.SecretAccessKey! },
    };
  } finally {
    iam.destroy();
  }
}

/** From now on moto authenticates and authorizes every request (no key of MOTO_CREDENTIALS works). */
export async function enforceIam(moto: MotoServer): Promise<void> {
  const res = await fetch(`${moto.endpoint}/moto-api/reset-auth`, { method: "POST", body: "0" });
  if (!res.ok) throw new Error(`moto reset-auth: HTTP ${res.status} ${await res.text()}`);
}
