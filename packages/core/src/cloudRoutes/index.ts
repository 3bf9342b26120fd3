export {
  GCP_CLOUD_ROUTES_PERMISSIONS,
  awsCloudRoutesPolicy,
  gcpCloudRoutesRole,
  type AwsPolicyDocument,
} from "./cloudIam.ts";
