// What the SDK's own vitest setup does before its tests: no tracing.
import { setTracingDisabled } from "@openai/agents-core";

setTracingDisabled(true);
