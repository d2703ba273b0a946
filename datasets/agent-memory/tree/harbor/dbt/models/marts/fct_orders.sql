{{ config(
    materialized='incremental',
    unique_key='order_id',
    on_schema_change='append_new_columns',
    contract={'enforced': true}
) }}

select
    o.order_id,
    o.tenant_id,
    c.customer_key,          -- pseudonymised; raw e-mail never reaches marts
    o.status,
    o.total_amount_cents,
    o.created_at,
    o.updated_at
from {{ ref('stg_orders') }} o
join {{ ref('stg_customers') }} c using (tenant_id, customer_id)
{% if is_incremental() %}
where o.updated_at > (select max(updated_at) from {{ this }})
{% endif %}
