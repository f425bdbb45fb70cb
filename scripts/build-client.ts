import path from "node:path";
import { buildClientPackage } from "./client/build-client-package";

/**
 * `npm run build:client [out-dir]`: the typed client as a package another project can use (`berth/client`:
 * dist/client/index.js and its declarations, no `@/` alias left). See server/client/README.md.
 */
const outDir = path.resolve(process.argv[2] ?? "dist/client");
const built = await buildClientPackage(outDir);
process.stdout.write(
  `wrote ${outDir}/${built.js} and ${built.types} (${built.declarationFiles} declaration files)\n`,
);
