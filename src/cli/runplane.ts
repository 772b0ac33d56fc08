#!/usr/bin/env node
/**
 * `runplane [command]`: the server's command line (the package's bin). Each command loads only
 * what it runs: `runplane engine` never loads the server, `runplane tail` only the client.
 */
const USAGE = `usage: runplane [command] [flags]

  start              the server (the default): GraphQL on PORT (4000), configured by RUNPLANE_* variables
  engine [flags]     the embedded DynamoDB-compatible engine on its own (runplane engine --help)
  tail <runId>       prints a run's events from the start, then live (runplane tail --help)
  demo [--url URL]   a worker, a budget, a crash and a take-over, against a server (or one of its own)
  help               this text`;

async function run(argv: string[]) {
  const [command = 'start', ...args] = argv;
  switch (command) {
    case 'start': {
      const { main, failed } = await import('../main.ts');
      return main().catch(failed);
    }
    case 'engine':
      return (await import('@runplane/engine/cli')).main(args);
    case 'tail':
      return (await import('./tail.ts')).main(args);
    case 'demo':
      return (await import('./demo.ts')).main(args);
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return;
    default:
      console.error(`runplane: no command '${command}'\n\n${USAGE}`);
      process.exit(2);
  }
}

void run(process.argv.slice(2));
