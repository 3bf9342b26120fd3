// The official @google-cloud/compute clients (REST transport) pointed at the routes contract fake
// on loopback, with a fixed access token (the fake checks no authentication).
import { GlobalOperationsClient, RoutesClient } from "@google-cloud/compute";
import { OAuth2Client } from "google-auth-library";

export function gcpClientsFor(port: number) {
  const authClient = new OAuth2Client();
  authClient.setCredentials({ access_token: "contract-fake", expiry_date: Date.now() + 24 * 3600_000 });
  const opts = { fallback: true, apiEndpoint: "127.0.0.1", port, protocol: "http", authClient } as const;
  return { routes: new RoutesClient(opts), operations: new GlobalOperationsClient(opts) };
}
