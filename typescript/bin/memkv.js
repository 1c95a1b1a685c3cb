#!/usr/bin/env node
// The `memkv` command, installed with the package: the whole command line of the memkv binary
// (serve, mcp, exec, sync, ...), run by the native addon that carries it (native/memkv.node), so
// the package needs no second build of it and no Rust on the machine.
import { createRequire } from 'node:module';

const { cli } = createRequire(import.meta.url)('../native/memkv.node');
process.exitCode = cli(['memkv', ...process.argv.slice(2)]);
