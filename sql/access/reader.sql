-- The read-only account of Grafana and `gpuledger serve` on a ClickHouse server.
--
-- `gpuledger migrate` applies this when CLICKHOUSE_READER_PASSWORD is set and CLICKHOUSE_USER may
-- manage access (CREATE USER, GRANT ... WITH GRANT OPTION); otherwise an administrator runs it once,
-- with the three placeholders replaced. readonly = 2: SELECT only, but the client may still set
-- query settings (Grafana's plugin and clickhouse-connect do); the grant keeps it in one database,
-- and without CREATE TEMPORARY TABLE no table function (file(), url(), remote()) is allowed.
-- The embedded endpoint has this account built in (CLICKHOUSE_READER_USER, readonly = 1).
CREATE USER IF NOT EXISTS <reader> IDENTIFIED WITH sha256_password BY <password> SETTINGS readonly = 2;
ALTER USER <reader> IDENTIFIED WITH sha256_password BY <password> SETTINGS readonly = 2;
REVOKE ALL ON *.* FROM <reader>;
GRANT SELECT ON <database>.* TO <reader>;
