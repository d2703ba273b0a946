// Typed API client generated from the ledger OpenAPI spec (npm run gen:api).
import createClient from "openapi-fetch";
import type { paths } from "./schema";

export const api = createClient<paths>({ baseUrl: "/api" });
