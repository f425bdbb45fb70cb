import { DEFAULT_PREBUILT_GATEWAY, writeGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";

/**
 * `npm run build:gateway [out-file]`: bundles the in-sandbox MCP gateway into one CommonJS file (Node >= 18)
 * with esbuild. Only needed where Berth runs without its TypeScript sources; otherwise the Docker provider
 * bundles from source on first use.
 */
const outFile = process.argv[2] ?? DEFAULT_PREBUILT_GATEWAY;
const bundle = await writeGatewayBundle(outFile);
process.stdout.write(
  `wrote ${outFile} (${bundle.code.length} bytes, sha256 ${bundle.sha256.slice(0, 16)})\n`,
);
