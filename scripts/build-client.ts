import path from "node:path";
import { packClientPackage } from "./client/pack-client-package";

/**
 * `npm run build:client [out-dir]`: the typed client as a package of its own (`berth-client`: the bundle, its
 * declarations with no `@/` alias left, a package.json with its dependencies and no scripts) in
 * `<out-dir>/package`, packed into `<out-dir>/berth-client-<version>.tgz` for `npm install <tarball>`.
 * See server/client/README.md.
 */
const outDir = path.resolve(process.argv[2] ?? "dist/berth-client");
const tarball = await packClientPackage(outDir);
process.stdout.write(`wrote ${tarball}\ninstall it in another project with: npm install ${tarball}\n`);
