"""The driver of a standalone-cluster test, in its own process (the test process has a local session).

    cluster_driver.py MASTER_URL BUS_PATH HOSTS

Runs the reads the test checks and prints one JSON object: for each read, its sorted ids or its error."""
import json
import sys

from mappedbus_py.spark import session

LAYOUT = "id:int64,value:int32"


def main():
    master, path, hosts = sys.argv[1:4]
    spark = session("mappedbus-cluster", master, spark_sql_shuffle_partitions=2,
                    **{"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                       "spark.driver.memory": "512m", "spark.executor.memory": "512m",
                       "spark.locality.wait": "30s", "spark.task.maxFailures": "2",
                       "spark.cores.max": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    out = {}

    def attempt(name, **options):
        r = spark.read.format("mappedbus").option("path", path).option("layout", LAYOUT)
        for k, v in options.items():
            r = r.option(k, v)
        try:
            out[name] = sorted(row.id for row in r.load().select("id").collect())
        except Exception as e:  # the test looks at the message
            out[name] = {"error": str(e)[:4000]}

    attempt("per_host", hosts=hosts)
    attempt("per_host_all", hosts="*")
    attempt("driver_planned")
    attempt("driver_planned_no_host_check", checkHost="false")
    print(json.dumps(out), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
