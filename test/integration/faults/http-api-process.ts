/**
 * An HTTP API process for the PostgreSQL outage tests: the tRPC fetch handler the Next route serves, over
 * the runtime the app builds, on a loopback port; its database is whatever DATABASE_URL names (the test's
 * TCP proxy in front of the machine's PostgreSQL). Prints `{"url": …}` once it listens.
 */
import { handleTrpcRequest } from "@/server/api/http-handler";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { serveFetchHandler } from "../api/support/serve-fetch-handler";

const runtime = createTestApiRuntime();
const served = await serveFetchHandler((request) => handleTrpcRequest(request, runtime));
process.stdout.write(`${JSON.stringify({ url: served.url })}\n`);
process.once("SIGTERM", () => void served.close().then(() => process.exit(0)));
