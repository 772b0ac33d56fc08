/**
 * Builds @runplane/client (packages/client/dist): ESM JavaScript, declarations and source maps by
 * tsc; then makes the declarations stand without gql.tada. The client's own documents are typed
 * from schema.graphql by gql.tada, and tsc writes each one's result and variables out in full,
 * wrapped in gql.tada's document type: that wrapper becomes the client's TypedDocument, so a
 * project installing the client needs neither gql.tada nor the compiler it peers. Only `/typed`
 * (and the schema's introspection it reads) still name gql.tada, an optional peer.
 *   npm run build -w @runplane/client
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGE = fileURLToPath(new URL('../packages/client/', import.meta.url));
const DIST = `${PACKAGE}dist/`;
/** The declarations that may name gql.tada: the schema-typed `graphql` and what it reads. */
const TYPED = ['typed.d.ts', 'graphql-env.d.ts'];

export function buildClient() {
  rmSync(DIST, { recursive: true, force: true });
  execFileSync(process.execPath, [fileURLToPath(import.meta.resolve('typescript/bin/tsc')), '-p', `${PACKAGE}tsconfig.build.json`], {
    stdio: 'inherit',
  });
  // tsc emits no declaration file it was given; typed.d.ts imports this one by name.
  copyFileSync(`${PACKAGE}src/graphql-env.d.ts`, `${DIST}graphql-env.d.ts`);
  copyFileSync(fileURLToPath(new URL('../schema.graphql', import.meta.url)), `${PACKAGE}schema.graphql`);

  const operations = `${DIST}operations.d.ts`;
  const wrapper = 'import("gql.tada").TadaDocumentNode';
  writeFileSync(
    operations,
    `import type { TypedDocument } from './graphql.js';\n/** gql.tada's document type, as the client's own (its third parameter, fragment masking, is not used). */\ntype TadaDocumentNode<Result, Variables, _Decoration = void> = TypedDocument<Result, Variables>;\n${readFileSync(operations, 'utf8').replaceAll(wrapper, 'TadaDocumentNode')}`,
  );
  const naming = readdirSync(DIST).filter(
    (file) =>
      file.endsWith('.d.ts') &&
      !TYPED.includes(file) &&
      /from ['"]gql\.tada['"]|import\(['"]gql\.tada['"]\)/.test(readFileSync(`${DIST}${file}`, 'utf8')),
  );
  if (naming.length) throw new Error(`declarations still naming gql.tada: ${naming.join(', ')}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildClient();
  console.log(`built ${DIST}`);
}
