// The SDK's index as the tests of the project "savepoint" import it: every
// export of the package, and SavepointSession's MemorySession in place of its own.
export * from "../node_modules/@openai/agents-core/dist/index.mjs";
export { MemorySession } from "./memorySession";
