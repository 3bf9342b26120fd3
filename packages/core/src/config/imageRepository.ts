// A registry and optional path that images are taken from under their usual names (a site's mirror).
import { z } from "zod";

export const imageRepositorySchema = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(\/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$/, {
    error: "must be a registry and optional path, e.g. registry.example.net:5000/k8s",
  });
