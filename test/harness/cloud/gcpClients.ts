// The official @google-cloud/compute clients (REST transport), loaded as the LB pod loads them,
// pointed at the routes contract fake on loopback, with a fixed access token (the fake checks no
// authentication).
import { OAuth2Client } from "google-auth-library";
import { loadGcpClients } from "../../../lb-image/src/cloudRoutes/gcpClients.ts";

export function gcpClientsFor(port: number) {
  const authClient = new OAuth2Client();
  authClient.setCredentials({ access_token: "contract-fake", expiry_date: Date.now() + 24 * 3600_000 });
  return loadGcpClients({ apiEndpoint: "127.0.0.1", port, protocol: "http", authClient });
}
