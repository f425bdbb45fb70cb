/**
 * An HTTP API process for the PostgreSQL outage tests: the tRPC fetch handler the Next route serves, over
 * the runtime the app builds, on a loopback port; its database is whatever DATABASE_URL names (the test's
 * TCP proxy in front of the machine's PostgreSQL, or a test's own server). Prints `{"url": …}` once it
 * listens; with BERTH_FAULTS_TENANT_LABEL set it first creates a tenant fixture in that database (one the
 * test process cannot reach through its own client) and adds its `tenantId` and `adminKey`.
 */
import { handleTrpcRequest } from "@/server/api/http-handler";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { serveFetchHandler } from "../api/support/serve-fetch-handler";
import { createTenantFixture } from "../api/support/tenant-fixtures";

const runtime = createTestApiRuntime();
const label = process.env.BERTH_FAULTS_TENANT_LABEL;
const fixture = label ? await createTenantFixture(runtime, label) : undefined;
const served = await serveFetchHandler((request) => handleTrpcRequest(request, runtime));
process.stdout.write(
  `${JSON.stringify({
    url: served.url,
    ...(fixture ? { tenantId: fixture.tenant.id, adminKey: fixture.adminKey.plainKey } : {}),
  })}\n`,
);
process.once("SIGTERM", () => void served.close().then(() => process.exit(0)));
