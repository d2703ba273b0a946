"""Dagster code location: exports as assets, dbt models via dagster-dbt."""
from dagster import Definitions, ScheduleDefinition, define_asset_job
from dagster_dbt import DbtCliResource

from harbor.orchestration.assets import dbt_models, raw_customers_export, raw_orders_export

nightly_exports = define_asset_job("nightly_exports", selection="*")

defs = Definitions(
    assets=[raw_orders_export, raw_customers_export, dbt_models],
    schedules=[ScheduleDefinition(job=nightly_exports, cron_schedule="15 2 * * *")],
    resources={"dbt": DbtCliResource(project_dir="dbt")},
)
