/** Where the client reports retries, reconcile decisions and ledger failures. Attributes never hold payloads. */
export interface Logger {
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}

/**
 * The Logger a client has unless DialOptions.logger names another: it
 * discards every entry, since a library writes nothing the application did
 * not ask for.
 */
export const discardLogger: Logger = Object.freeze({ info() {}, warn() {}, error() {} });

/** The levels of consoleLogger, from the most verbose. */
export type Level = "info" | "warn" | "error";

const levels: Record<Level, number> = { info: 0, warn: 1, error: 2 };

/**
 * Returns a Logger that writes lines of level min and above to stderr, as
 * `time=... level=WARN msg="..." key=value`, like the Go client's default slog text
 * handler.
 */
export function consoleLogger(min: Level = "info"): Logger {
  const write = (level: Level) => (msg: string, attrs: Record<string, unknown> = {}) => {
    if (levels[level] < levels[min]) return;
    let line = `time=${new Date().toISOString()} level=${level.toUpperCase()} msg=${JSON.stringify(msg)}`;
    for (const [k, v] of Object.entries(attrs)) {
      const s = v instanceof Error ? v.message : typeof v === "string" || typeof v === "bigint" ? String(v) : JSON.stringify(v);
      line += ` ${k}=${/^[^\s"=]+$/.test(s ?? "") ? s : JSON.stringify(s)}`;
    }
    process.stderr.write(line + "\n");
  };
  return { info: write("info"), warn: write("warn"), error: write("error") };
}
