from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("redisbeat_django", "0005_overlap_jitter"),
    ]

    operations = [
        migrations.CreateModel(
            name="Entry",
            fields=[
                (
                    "name",
                    models.CharField(
                        max_length=200, primary_key=True, serialize=False, verbose_name="name"
                    ),
                ),
            ],
            options={
                "verbose_name": "entry",
                "verbose_name_plural": "entries",
                "permissions": (("control_entry", "Can control entries (pause, run now, ...)"),),
                "default_permissions": ("view",),
                "managed": False,
            },
        ),
    ]
